"""What every object-store adapter shares, with no storage client imported: the sealstore
metadata fields of a sealed object (``metadata``) and HTTP byte ranges (``ranges``).  The S3
adapter adds its names and errors around them; another store's adapter would do the same."""
