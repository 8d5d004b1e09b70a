"""Tenants for objects: which tenant an object belongs to, and the keyring and context it is
sealed and opened with (docs/TENANTS.md, "Objects").

An :class:`ObjectTenancy` makes an object client (S3, GCS) or an :class:`ObjectSealing`
tenant-aware.  The tenant of an object comes from, strongest first:

1. the **key rule** ``prefix``: a pattern with one ``{tenant}`` field (``"tenants/{tenant}/"``,
   matched at the start of the object key) or a callable ``key -> tenant or None``;
2. the **client's tenant** ``tenant`` (one client per tenant);
3. the **context**: the innermost ``with sealstore.tenant(name):`` block.

Every source that names a tenant must name the same one (TenantMismatch otherwise: a key under
``tenants/a/`` written inside ``sealstore.tenant("b")``), and a tenant-aware client with no
tenant for an object raises TenantRequired; both before any byte is sent.

A tenant's object is sealed under the tenant's data keyring (``sealstore.tenants``: one key per
tenant, destroyed by ``sealstore tenants shred``) with the context
``object_binding(tenant)[1] || context``: it opens only as that tenant's, at its location.

Objects written before tenancy (under the client's own keyring, context ``context`` alone) are
recognised by their key id: one that is not the tenant's but belongs to the client's own
keyring.  They keep opening while ``legacy`` is True (the default), unbound to any tenant, until
rotation re-seals them under the tenant's keys (``sealstore rotate --objects`` with a tenant).
An object whose key is neither the tenant's nor a legacy one raises :class:`WrongTenant`: it was
sealed for another tenant (or under a key this process does not hold).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sealstore.errors import TenantMismatch, TenantRequired, WrongTenant
from sealstore.tenants import check_name, current_tenant, object_binding

if TYPE_CHECKING:
    from sealstore.keyring import Keyring

__all__ = ["ObjectBinding", "ObjectTenancy", "TenantRule"]

#: a key rule: a pattern with one ``{tenant}`` field, or a callable ``key -> tenant or None``
TenantRule = str | Callable[[str], "str | None"]

_FIELD = "{tenant}"


def _compile(pattern: str) -> re.Pattern[str]:
    if pattern.count(_FIELD) != 1:
        raise ValueError("tenant_prefix must hold exactly one '{tenant}' field")
    before, after = pattern.split(_FIELD)
    if "{" in before + after or "}" in before + after:
        raise ValueError("tenant_prefix holds only the '{tenant}' field")
    return re.compile(re.escape(before) + r"([^/]*)" + re.escape(after))


class ObjectBinding:
    """What one object is sealed or opened with: ``keyring``, ``context`` and its ``tenant``
    (None: an untenanted (legacy) binding)."""

    __slots__ = ("context", "keyring", "tenant")

    def __init__(self, keyring: Keyring, context: bytes, tenant: str | None) -> None:
        self.keyring: Keyring = keyring
        self.context: bytes = context
        self.tenant: str | None = tenant

    def __repr__(self) -> str:
        return f"<ObjectBinding tenant={self.tenant!r}>"


class ObjectTenancy:
    """How a tenant-aware object client finds each object's tenant (see the module doc).

    ``tenant``: the client's tenant; ``prefix``: the key rule; ``legacy``: open objects written
    before tenancy (under the client's own keyring).  With neither ``tenant`` nor ``prefix``
    the tenant comes from the ``sealstore.tenant()`` block alone."""

    def __init__(
        self, *, tenant: str | None = None, prefix: TenantRule | None = None, legacy: bool = True
    ) -> None:
        self.tenant: str | None = check_name(tenant) if tenant is not None else None
        self.prefix: TenantRule | None = prefix
        self._pattern = _compile(prefix) if isinstance(prefix, str) else None
        if prefix is not None and self._pattern is None and not callable(prefix):
            raise TypeError("tenant_prefix must be a pattern with '{tenant}' or a callable")
        self.legacy: bool = bool(legacy)
        # (bucket, key) -> [tenant, count]: the tenant of a managed transfer under way, for its
        # worker threads (which do not inherit the caller's sealstore.tenant() block)
        self._pins: dict[tuple[str, str], list[Any]] = {}
        self._pins_lock = threading.Lock()

    def __repr__(self) -> str:
        rule = self.prefix if isinstance(self.prefix, str) or self.prefix is None else "<rule>"
        return f"<ObjectTenancy tenant={self.tenant!r} prefix={rule!r} legacy={self.legacy}>"

    @classmethod
    def of(
        cls,
        tenant: str | bool | None,
        tenant_prefix: TenantRule | None,
        tenant_legacy: bool = True,
    ) -> ObjectTenancy | None:
        """The tenancy of an ``encrypt_client`` call: None when it is not tenant-aware.
        ``tenant``: a name, or True for "the ``sealstore.tenant()`` block only"."""
        if tenant is None and tenant_prefix is None:
            return None
        if tenant is False:
            raise ValueError("tenant=False: leave tenant out for a client without tenants")
        name = None if tenant is True else tenant
        return cls(tenant=name, prefix=tenant_prefix, legacy=tenant_legacy)

    def from_key(self, key: str) -> str | None:
        """The tenant the key rule gives ``key`` (None: the rule does not cover it)."""
        if self.prefix is None:
            return None
        if self._pattern is not None:
            found = self._pattern.match(key)
            if found is None:
                return None
            name = found.group(1)
        else:
            name = self.prefix(key)  # type: ignore[operator]
            if name is None:
                return None
        try:
            return check_name(name)
        except ValueError:
            raise TenantRequired(
                "the object key does not name a valid tenant where the tenant_prefix rule "
                "expects one; nothing was sent"
            ) from None

    def tenant_for(self, bucket: str, key: str) -> str:
        """The tenant of ``bucket/key``: the key rule, the client's tenant, the active
        ``sealstore.tenant()`` block, in that order; all given must agree (TenantMismatch);
        TenantRequired when none is."""
        found = [
            (what, name)
            for what, name in (
                ("the key's tenant_prefix rule", self.from_key(key)),
                ("the client's tenant", self.tenant),
                ("the sealstore.tenant() block", current_tenant() or self._pinned(bucket, key)),
            )
            if name is not None
        ]
        if not found:
            raise TenantRequired(
                f"{bucket}/{key}: this client binds objects to a tenant and none is set (a "
                "tenant_prefix rule, the client's tenant= or `with sealstore.tenant(name):`); "
                "nothing was sent"
            )
        what, name = found[0]
        for other, other_name in found[1:]:
            if other_name != name:
                raise TenantMismatch(
                    f"{bucket}/{key}: {what} says tenant {name!r}, {other} says "
                    f"{other_name!r}; nothing was sent"
                )
        return name

    def _pinned(self, bucket: str, key: str) -> str | None:
        if not self._pins:
            return None
        with self._pins_lock:
            pin = self._pins.get((bucket, key))
            return None if pin is None else str(pin[0])

    @contextlib.contextmanager
    def transfer(self, bucket: str, key: str) -> Iterator[str]:
        """A managed transfer of ``bucket/key`` (its requests sent by worker threads): the
        tenant is resolved here, in the caller's thread (TenantRequired, TenantMismatch before
        anything is sent), and stands for the caller's ``sealstore.tenant()`` block in threads
        that have none, for this object, until the block ends."""
        name = self.tenant_for(bucket, key)
        where = (bucket, key)
        with self._pins_lock:
            pin = self._pins.get(where)
            if pin is not None and pin[0] != name:
                raise TenantMismatch(
                    f"{bucket}/{key}: a transfer for tenant {pin[0]!r} is under way; nothing "
                    "was sent"
                )
            if pin is None:
                self._pins[where] = [name, 1]
            else:
                pin[1] += 1
        try:
            yield name
        finally:
            with self._pins_lock:
                pin = self._pins[where]
                pin[1] -= 1
                if pin[1] == 0:
                    del self._pins[where]

    def sealing(self, bucket: str, key: str, context: bytes) -> ObjectBinding:
        """The binding a new object at ``bucket/key`` is sealed with: the tenant's primary key
        and tenant context (UnknownTenant, TenantShredded, TenantRequired, TenantMismatch)."""
        name = self.tenant_for(bucket, key)
        ring, prefix = object_binding(name)
        return ObjectBinding(ring, prefix + context, name)

    def opening(
        self, bucket: str, key: str, key_id: int, own: Keyring, context: bytes
    ) -> ObjectBinding:
        """The binding an object sealed under ``key_id`` opens with at ``bucket/key``: the
        tenant's; a legacy one (``own`` keyring, ``context`` alone) for a key of ``own`` that is
        not the tenant's; WrongTenant for any other key.  A shredded tenant raises
        TenantShredded first, legacy objects included."""
        name = self.tenant_for(bucket, key)
        ring, prefix = object_binding(name)
        if key_id in ring:
            return ObjectBinding(ring, prefix + context, name)
        if self.legacy and key_id in own:
            return ObjectBinding(own, context, None)
        raise WrongTenant(
            f"{bucket}/{key} was not sealed for tenant {name!r}: its key {key_id:08x} is none "
            "of the tenant's keys"
        )
