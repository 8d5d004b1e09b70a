"""Transparent client-side encryption for google-cloud-storage clients (see docs/GCS.md)."""

from __future__ import annotations

from sealstore.extras import require

require("gcs", "sealstore.adapters.gcs")  # before anything imports google.cloud.storage
