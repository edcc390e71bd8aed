"""Maps the top-level folders onto the import packages waferline.server, waferline.engine, ...

Everything else about the distribution lives in pyproject.toml; only the package list needs code, because
setuptools cannot prefix the packages it finds.
"""

from setuptools import find_packages, setup

TOP_LEVEL = ("server", "syntax", "engine", "hardware", "training", "cli", "benchmarks")

packages = [f"waferline.{name}" for name in find_packages(include=[f"{top}*" for top in TOP_LEVEL])]
package_dir = {f"waferline.{top}": top for top in TOP_LEVEL}

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"": ["*.scm", "*.json", "*.safetensors", "*.md", "*.txt", "*.c", "*.h"]},
    include_package_data=True,
)
