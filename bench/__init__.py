"""sealstore's benchmarks (``sealstore.bench``): never collected by pytest, never asserted.

Every figure is measured in the run that prints it: medians of repeated batches, with the
spread, and every comparison is a ratio to a baseline measured in the same process.
"""
