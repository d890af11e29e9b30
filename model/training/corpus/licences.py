"""Which licences are kept: read from an archive's metadata, permissive ones only."""

from __future__ import annotations

import email.parser
import re

PERMISSIVE = re.compile(
    r"\b(MIT|BSD|0BSD|Apache|PSF|Python Software Foundation|Python-2\.0|ISC|Unlicense|Zlib|"
    r"Public Domain|HPND|Historical Permission|ZPL|Zope Public License|Repoze|BSL-1\.0|"
    r"Boost Software License|CC0)\b",
    re.IGNORECASE,
)
# Copyleft, weak copyleft included: MPL, EPL, CDDL and the GPL family are not kept.
COPYLEFT = re.compile(
    r"(\b(A?GPL|LGPL|SSPL|EUPL|CC-BY-SA|MPL|EPL|CDDL|OSL)|\bGNU\b|General Public License|"
    r"Mozilla Public|Eclipse Public|Commons Clause|Server Side Public)",
    re.IGNORECASE,
)


def licence_of(metadata: str) -> str:
    """The licence named in METADATA / PKG-INFO: License-Expression, classifiers, License."""
    headers = email.parser.HeaderParser().parsestr(metadata)
    found = [headers.get("License-Expression", "")]
    found += [
        c.split("::")[-1].strip()
        for c in headers.get_all("Classifier", [])
        if c.startswith("License ::")
    ]
    licence_field = (headers.get("License") or "").strip()
    if licence_field and licence_field.upper() != "UNKNOWN":
        found.append(licence_field.splitlines()[0][:120])
    return "; ".join(dict.fromkeys(f for f in found if f)) or "unknown"


def _permissive(text: str) -> bool:
    return bool(PERMISSIVE.search(text)) and not COPYLEFT.search(text)


def licence_allowed(licence: str) -> bool:
    """Permissive and nothing copyleft named; or an SPDX `A OR B` with a permissive choice.

    "MPL-2.0 AND MIT" (both apply) is dropped; "MPL-2.0 OR MIT" is kept, since the MIT
    alternative may be chosen. Classifiers cannot say AND or OR, so a classifier naming a
    copyleft licence drops the package unless one field is such an SPDX choice."""
    if _permissive(licence):
        return True
    for part in licence.split("; "):
        alternatives = re.split(r"\s+OR\s+", part.strip("() "))
        if len(alternatives) > 1 and any(_permissive(a) for a in alternatives):
            return True
    return False
