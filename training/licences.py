"""Which licence a PyPI distribution declares, and whether the project may train on it.

The corpus keeps only permissive licences (the project's corpus rules, docs/corpus.md): MIT, BSD, Apache-2.0, PSF,
ISC, Unlicense, 0BSD and public domain. A distribution says what it is under in three places of its metadata, read
in this order:
`License-Expression` (an SPDX expression, PEP 639), the `License :: ...` trove classifiers, and the free-text
`License` field (a name, or the whole licence text). Anything not recognised as one of the permissive licences is
refused: a wrong "no" costs a few files, a wrong "yes" puts code in the model that must not be there.
"""

from __future__ import annotations

import re
from email.message import Message
from email.parser import Parser

# canonical name -> patterns (case-insensitive) that name it in a classifier or a free-text License field
PERMISSIVE: dict[str, tuple[str, ...]] = {
    "MIT": (r"\bMIT\b", r"\bExpat\b", r"Permission is hereby granted, free of charge"),
    "BSD": (r"\bBSD\b", r"Redistribution and use in source and binary forms"),
    "Apache-2.0": (r"\bApache\b",),
    "PSF-2.0": (r"\bPSF\b", r"Python Software Foundation"),
    "ISC": (r"\bISC\b", r"\bISCL\b"),
    "Unlicense": (r"\bUnlicense\b",),
    "0BSD": (r"\b0BSD\b",),
    "public domain": (r"\bpublic domain\b", r"\bCC0\b"),
}
# Names that make a free-text field or classifier not permissive, whatever else it mentions.
COPYLEFT = re.compile(r"\b(A?GPL|LGPL|GNU|MPL|Mozilla|EPL|Eclipse|CDDL|EUPL|OSL|SSPL|Commons Clause)\b", re.I)
# SPDX identifiers (License-Expression) of the permissive licences, by canonical name.
SPDX: dict[str, str] = {
    "MIT": "MIT", "MIT-0": "MIT", "BSD-2-CLAUSE": "BSD", "BSD-3-CLAUSE": "BSD", "BSD-3-CLAUSE-CLEAR": "BSD",
    "APACHE-2.0": "Apache-2.0", "PSF-2.0": "PSF-2.0", "PYTHON-2.0": "PSF-2.0", "ISC": "ISC",
    "UNLICENSE": "Unlicense", "0BSD": "0BSD", "CC0-1.0": "public domain",
}  # fmt: skip


def read_metadata(text: str) -> Message:
    """A METADATA / PKG-INFO file (RFC 822 headers, then the long description)."""
    return Parser().parsestr(text, headersonly=True)


def spdx_licence(expression: str) -> str | None:
    """The canonical permissive name an SPDX expression allows, or None.

    `A OR B` is permissive when either side is (the first such side is named); `A AND B` (or `WITH` an exception)
    only when every part is, and then all are named ("Apache-2.0 AND MIT").
    """
    expr = expression.strip().strip("()").upper()
    if not expr:
        return None
    alternatives = [a.strip(" ()") for a in re.split(r"\s+OR\s+", expr)]
    for alternative in alternatives:
        parts = [p.strip(" ()") for p in re.split(r"\s+(?:AND|WITH)\s+", alternative)]
        names = [SPDX.get(p) for p in parts]
        if all(names):
            return " AND ".join(dict.fromkeys(n for n in names if n))  # every licence the file is under
    return None


def text_licence(text: str) -> str | None:
    """The permissive licence a classifier or a free-text License field names, or None (unknown or copyleft)."""
    if not text.strip() or COPYLEFT.search(text):
        return None
    for name, patterns in PERMISSIVE.items():
        if any(re.search(p, text, re.I) for p in patterns):
            return name
    return None


def licence_of(metadata: Message) -> tuple[str | None, str]:
    """(canonical permissive licence or None, what the metadata said) for one distribution."""
    expression = metadata.get("License-Expression")
    if expression:
        return spdx_licence(str(expression)), f"License-Expression: {expression}"
    classifiers = [str(c) for c in metadata.get_all("Classifier") or [] if str(c).startswith("License ::")]
    # Dual licensing is listed as several classifiers: one permissive licence among them is enough.
    named = [c.split("::")[-1].strip() for c in classifiers if c.strip() != "License :: OSI Approved"]
    for c in named:
        found = text_licence(c)
        if found:
            return found, f"Classifier: {c}"
    field = str(metadata.get("License") or "").strip()
    if field and field.upper() != "UNKNOWN":
        return text_licence(field), "License: " + field.splitlines()[0][:80]
    if named:
        return None, "Classifier: " + "; ".join(named)
    return None, "no licence in the metadata"
