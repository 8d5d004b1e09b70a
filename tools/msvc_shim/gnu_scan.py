"""Fail on GNU C in what MSVC would compile: read the preprocessed output of one source (as
``clang --driver-mode=cl /U__clang__ /E /clang:-dD`` gives it, so the _MSC_VER branches are
the ones left, with the macro definitions they keep) and report every ``__attribute__``,
``__builtin_``, ``asm``/``__asm__``, ``typeof``, statement expression ``({`` or
``__restrict__`` in the project's own files (native/, tests/native/), not in the compiler's
headers: in a kept ``#define``, or on a kept line whose own source text has it (an
intrinsic macro of the compiler's headers expands to builtins: that is the compiler's
business, not ours).

    clang --driver-mode=cl ... /E /clang:-dD -- SRC | python tools/msvc_shim/gnu_scan.py SRC

Exit 0 when none, 1 with one line per hit.
"""

import re
import sys

MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"')
GNU = re.compile(
    r"\b(__attribute__|__builtin_\w+|__asm__|__asm|asm|__typeof__|typeof|__restrict__)\b|\(\{"
)
OURS = ("native/", "tests/native/")


_SOURCES: dict[str, list[str]] = {}


def source_line(path: str, line: int) -> str:
    if path not in _SOURCES:
        try:
            with open(path, encoding="utf-8") as f:
                _SOURCES[path] = f.read().splitlines()
        except OSError:
            _SOURCES[path] = []
    lines = _SOURCES[path]
    return lines[line - 1] if 0 < line <= len(lines) else ""


def main() -> int:
    src = sys.argv[1] if len(sys.argv) > 1 else "-"
    where, line, hits = "", 0, []
    for text in sys.stdin:
        m = MARKER.match(text)
        if m:
            line, where = int(m.group(1)), m.group(2).replace("\\\\", "/").replace("\\", "/")
            continue
        if any(o in where for o in OURS) and "msvc_shim" not in where:
            g = GNU.search(text)
            if g and (text.startswith("#define") or g.group(0) in source_line(where, line)):
                hits.append(f"{where}:{line}: {g.group(0)} (GNU C under MSVC): {text.strip()}")
        line += 1
    for h in hits:
        print(f"{src}: {h}")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
