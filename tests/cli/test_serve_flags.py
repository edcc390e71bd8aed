"""`waferline serve`'s engine flags are made from the option declarations: their defaults and choices are the
options' own, and what they set arrives as the options the server is built with."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from waferline.cli import serve
from waferline.server.options import Options


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    serve.add_arguments(p)
    return p


def test_each_flag_has_its_options_default_and_choices() -> None:
    actions = {a.dest: a for a in parser()._actions}
    fields = {f.name: f for f in dataclasses.fields(Options)}
    for name in serve.FLAGS:
        assert actions[name].default == getattr(Options(), name)
        assert tuple(actions[name].choices or ()) == fields[name].metadata["option"].choices


def test_the_flags_become_the_servers_options(capsys: pytest.CaptureFixture[str]) -> None:
    built: list[Options] = []

    class Built(Exception):
        pass

    def make_server(options: Options):  # type: ignore[no-untyped-def]
        built.append(options)
        raise Built

    with pytest.raises(Built):
        serve.run(parser().parse_args(["--backend", "wafer", "--dtype", "float32", "--model", "tiny"]),
                  make_server=make_server)  # fmt: skip
    assert (built[0].backend, built[0].dtype, built[0].model) == ("wafer", "float32", "tiny")
    with pytest.raises(SystemExit):
        parser().parse_args(["--backend", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
