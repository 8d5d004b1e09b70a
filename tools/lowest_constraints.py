"""Print a pip constraints file pinning each direct dependency of pyproject.toml to its floor.

    python tools/lowest_constraints.py [pyproject.toml] > lowest.txt
    pip install -c lowest.txt ".[test]"

Every ``name>=X`` of ``[project] dependencies`` and of the library's extras (``LIBRARY``: the
adapters' and the KMS wrapping's dependencies) becomes ``name==X``: CI installs exactly the
lowest versions sealstore declares and runs the core and adapter tests on them.  Markers are
kept (``tomli>=1.1; python_version < '3.11'`` stays conditional).  A dependency without a floor
is an error: a floor nobody tests is a guess.

    python tools/lowest_constraints.py --test-requirements > test-requirements.txt

prints the test extra (the extras it names, ``sealstore[...]``, expanded) without the packages
that pin botocore to their own release and so cannot sit beside the lowest boto3
(``SEPARATE``): their tests skip there and run in the main test venv.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

_REQ = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(?P<spec>[^;]*?)\s*(?:;\s*(?P<marker>.+))?$"
)


#: the extras that hold library dependencies (the bench and test extras are tools)
LIBRARY = ("sqlalchemy", "s3", "gcs", "kms")


def floors(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = list(project["dependencies"])
    for extra in LIBRARY:
        deps += [d for d in project["optional-dependencies"][extra] if d not in deps]
    lines = []
    for dep in deps:
        m = _REQ.match(dep)
        if not m:
            raise SystemExit(f"cannot parse dependency {dep!r}")
        floor = re.search(r">=\s*([^,\s]+)", m["spec"])
        if not floor:
            raise SystemExit(f"dependency {dep!r} declares no floor (>=)")
        line = f"{m['name']}=={floor.group(1)}"
        lines.append(line + (f"; {m['marker']}" if m["marker"] else ""))
    return lines


SEPARATE = {"aiobotocore"}  # pins botocore == its own release


def test_requirements(pyproject: Path) -> list[str]:
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    out: list[str] = []
    _expand(extras, "test", out, set())
    return out


def _expand(extras: dict, extra: str, out: list[str], seen: set[str]) -> None:
    """Append ``extra``'s requirements to ``out``, each ``sealstore[a,b]`` replaced by the
    lists of ``a`` and ``b`` (each extra once), without ``SEPARATE`` and duplicates."""
    seen.add(extra)
    for dep in extras[extra]:
        m = _REQ.match(dep)
        if m["name"].lower() == "sealstore":
            names = re.search(r"\[([^\]]*)\]", dep).group(1).split(",")
            for name in (n.strip() for n in names):
                if name not in seen:
                    _expand(extras, name, out, seen)
        elif m["name"].lower() not in SEPARATE and dep not in out:
            out.append(dep)


def main(argv: list[str]) -> int:
    tests = "--test-requirements" in argv
    argv = [a for a in argv if a != "--test-requirements"]
    path = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "pyproject.toml"
    print("\n".join(test_requirements(path) if tests else floors(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
