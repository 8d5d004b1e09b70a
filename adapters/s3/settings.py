"""What an object carries besides its body and metadata, read back as request parameters.

Rewriting an object in place (``sealstore s3 rotate``: a PutObject, a CopyObject onto itself or
a multipart upload) would give it S3's defaults for everything the request does not repeat.
:func:`object_settings` reads what the object has, from its HeadObject response and two more
requests, as the parameters that write it again:

* content headers (``metadata.kept_headers``) and ``WebsiteRedirectLocation``;
* ``StorageClass`` (HeadObject names every class but STANDARD);
* server-side encryption: ``ServerSideEncryption``, the KMS key (``SSEKMSKeyId``) and
  ``BucketKeyEnabled``;
* object lock: ``ObjectLockMode`` with ``ObjectLockRetainUntilDate``, and
  ``ObjectLockLegalHoldStatus``;
* tags (GetObjectTagging), as ``Tagging``;
* the ACL (GetObjectAcl), as ``Grant*`` parameters, when it grants more than its owner's full
  control (the default every new object gets) and the caller may read it: without READ_ACP,
  or on a bucket whose ACLs are disabled, the rewritten object keeps the default.

CopyObject carries tags over by itself (``TaggingDirective`` COPY) and refuses ``Tagging``
without ``TaggingDirective=REPLACE``: :func:`for_copy` drops it.
"""

from __future__ import annotations

from urllib.parse import urlencode
from typing import Any

from botocore.exceptions import ClientError
from sealstore.errors import UnsupportedOperation

from ..objects.metadata import kept_headers

__all__ = ["for_copy", "object_settings"]

_FROM_HEAD = (
    "WebsiteRedirectLocation",
    "StorageClass",
    "ServerSideEncryption",
    "SSEKMSKeyId",
    "BucketKeyEnabled",
    "ObjectLockLegalHoldStatus",
)
_LOCK = ("ObjectLockMode", "ObjectLockRetainUntilDate")
# ACL permission -> the request parameter that grants it (S3 refuses WRITE on an object)
_GRANTS = {
    "FULL_CONTROL": "GrantFullControl",
    "READ": "GrantRead",
    "READ_ACP": "GrantReadACP",
    "WRITE_ACP": "GrantWriteACP",
}
# what GetObjectAcl may answer when the ACL cannot be read or ACLs are off for the bucket
_ACL_UNREADABLE = ("AccessDenied", "AccessControlListNotSupported", "NotImplemented")


def object_settings(raw: Any, bucket: str, key: str, head: dict[str, Any]) -> dict[str, Any]:
    """The request parameters that rewrite ``bucket/key`` with everything it has (``head``: its
    HeadObject response; ``raw``: a client that does not seal)."""
    version = {"VersionId": head["VersionId"]} if head.get("VersionId") else {}
    out = kept_headers(head)
    out.update({k: head[k] for k in _FROM_HEAD if head.get(k) not in (None, "")})
    if out.get("StorageClass") == "STANDARD":
        del out["StorageClass"]
    if all(head.get(k) for k in _LOCK):
        out.update({k: head[k] for k in _LOCK})
    tags = raw.get_object_tagging(Bucket=bucket, Key=key, **version).get("TagSet") or []
    if tags:
        out["Tagging"] = urlencode([(t["Key"], t["Value"]) for t in tags])
    out.update(_grants(raw, bucket, key, version))
    return out


def for_copy(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` for a CopyObject of the object onto itself (tags come along by default)."""
    return {k: v for k, v in settings.items() if k != "Tagging"}


def _grants(raw: Any, bucket: str, key: str, version: dict[str, str]) -> dict[str, Any]:
    try:
        acl = raw.get_object_acl(Bucket=bucket, Key=key, **version)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _ACL_UNREADABLE:
            return {}
        raise
    owner = (acl.get("Owner") or {}).get("ID")
    grants = [(g.get("Grantee") or {}, g.get("Permission")) for g in acl.get("Grants") or []]
    if all(p == "FULL_CONTROL" and who.get("ID") == owner for who, p in grants):
        return {}  # the default: nothing to repeat (and nothing a bucket without ACLs refuses)
    out: dict[str, list[str]] = {}
    for who, permission in grants:
        param = _GRANTS.get(permission)
        if param is None:
            raise UnsupportedOperation(
                f"the object's ACL grants {permission}, which a write cannot repeat"
            )
        out.setdefault(param, []).append(_grantee(who))
    return {param: ", ".join(values) for param, values in out.items()}


def _grantee(who: dict[str, Any]) -> str:
    if who.get("Type") == "Group":
        return f'uri="{who["URI"]}"'
    if who.get("Type") == "AmazonCustomerByEmail":
        return f'emailAddress="{who["EmailAddress"]}"'
    return f'id="{who["ID"]}"'
