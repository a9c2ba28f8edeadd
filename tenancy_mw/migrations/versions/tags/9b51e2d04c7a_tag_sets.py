"""tags: PostgreSQL's tag set table (each resource's tags as one array), filled and kept in step by a trigger

On other databases this revision changes nothing: the tag queries there
use the tag table alone (:mod:`tenancy_mw.tags.sets`).  The statements are
this revision's own, not the runtime's (tenancy_mw.tags.sets.TAG_SETS_DDL,
which a ``create_all`` runs on a new, empty tag table), with the lock and
the fill a tag table with rows needs: a test checks both build the same
catalog.

Revision ID: 9b51e2d04c7a
Revises: 7d3c1a9e4b20
Create Date: 2026-11-28
"""

from alembic import op

revision = "9b51e2d04c7a"
down_revision = "7d3c1a9e4b20"
branch_labels = None
depends_on = None

UPGRADE = (
    # No write of the tag table between the fill and the triggers.
    "LOCK TABLE tenancy_mw_tags IN SHARE ROW EXCLUSIVE MODE",
    "CREATE TABLE tenancy_mw_tag_sets (resource_id VARCHAR(255) NOT NULL PRIMARY KEY, tags TEXT[] NOT NULL)",
    "INSERT INTO tenancy_mw_tag_sets (resource_id, tags) SELECT resource_id, array_agg(tag::text ORDER"
    " BY tag) FROM tenancy_mw_tags GROUP BY resource_id",
    "CREATE INDEX ix_tenancy_mw_tag_sets_tags ON tenancy_mw_tag_sets USING gin (tags)",
    """CREATE FUNCTION tenancy_mw_tag_sets_sync() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE tenancy_mw_tag_sets SET tags = array_remove(tags, OLD.tag::text)
            WHERE resource_id = OLD.resource_id;
        IF NOT FOUND AND current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
                MESSAGE = 'the tag set of ' || OLD.resource_id || ' is not in this transaction''s snapshot';
        END IF;
        DELETE FROM tenancy_mw_tag_sets WHERE resource_id = OLD.resource_id AND tags = '{}';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO tenancy_mw_tag_sets AS sets (resource_id, tags) VALUES (NEW.resource_id, ARRAY[NEW.tag::text])
            ON CONFLICT (resource_id)
            DO UPDATE SET tags = array_append(array_remove(sets.tags, NEW.tag::text), NEW.tag::text);
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE FUNCTION tenancy_mw_tag_sets_truncate() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_relation_size('tenancy_mw_tag_sets') > 0 THEN
        TRUNCATE tenancy_mw_tag_sets;
    END IF;
    RETURN NULL;
END
$$""",
    "CREATE TRIGGER tenancy_mw_tag_sets_sync AFTER INSERT OR UPDATE OR DELETE ON tenancy_mw_tags FOR"
    " EACH ROW EXECUTE FUNCTION tenancy_mw_tag_sets_sync()",
    "CREATE TRIGGER tenancy_mw_tag_sets_truncate AFTER TRUNCATE ON tenancy_mw_tags FOR EACH STATEMENT"
    " EXECUTE FUNCTION tenancy_mw_tag_sets_truncate()",
)

DOWNGRADE = (
    "DROP TRIGGER IF EXISTS tenancy_mw_tag_sets_truncate ON tenancy_mw_tags",
    "DROP TRIGGER IF EXISTS tenancy_mw_tag_sets_sync ON tenancy_mw_tags",
    "DROP FUNCTION IF EXISTS tenancy_mw_tag_sets_truncate()",
    "DROP FUNCTION IF EXISTS tenancy_mw_tag_sets_sync()",
    "DROP TABLE IF EXISTS tenancy_mw_tag_sets",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
