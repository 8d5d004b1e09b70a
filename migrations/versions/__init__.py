"""sealstore's Alembic revisions (branch label ``sealstore``); see docs/ROTATION.md.

Add ``sealstore.migrations:versions`` to ``version_locations`` in ``alembic.ini``; then
``alembic upgrade heads`` (or ``sealstore@head``) creates the tables and
``alembic downgrade sealstore@base`` removes them.
"""
