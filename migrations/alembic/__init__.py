"""sealstore and Alembic: operations on users' columns and autogenerate settings.

* :mod:`.ops`: ``op.encrypt_column`` / ``op.decrypt_column`` (``import
  sealstore.migrations.alembic.ops`` registers them) and the autogenerate :data:`~.ops.rewriter`;
* :mod:`.inplace`: the per-dialect SQL (triggers, locks) that makes a conversion safe beside
  live writers;
* :mod:`.autogen`: :func:`~.autogen.alembic_options`, every hook for an application's ``env.py``;
* :mod:`.ownership`: which database objects are sealstore's, so autogenerate leaves them alone;
* :mod:`.cli`: ``sealstore encrypt-column`` / ``decrypt-column``.

sealstore's own revision scripts stay in ``sealstore.migrations:versions``, the location users'
``alembic.ini`` files name.
"""
