"""Key wrapping: how a key source protects keyring material at rest.

* :mod:`.master`: the :class:`Wrapper` protocol, the wrapping context, and
  :class:`MasterKeyWrapper` (a local 32-byte master key, AES-256-GCM);
* :mod:`.kms`: :class:`~sealstore.wrapping.kms.KmsWrapper`, AWS KMS envelope wrapping.

Which one a key source uses is configured (``wrapping`` in the config file: ``sealstore.config``).
"""

from .master import MATERIAL_SIZE, MasterKeyWrapper, Wrapper, wrap_context

__all__ = ["MATERIAL_SIZE", "MasterKeyWrapper", "Wrapper", "wrap_context"]
