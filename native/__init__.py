"""The C kernel sources, shipped inside the installed package as ``sealstore._csrc``.

Nothing imports this package: the package build compiles these files into ``sealstore._native``
(``build_ffi.py``) and ``sealstore._speedups`` (``build_speedups.py``: its sources and flags;
setup.py declares the extension from it), and ``sealstore bench`` compiles
``bench/kernel_bench.c`` against the same files, so its C-only figures are for the kernels of
the version that is installed.
"""
