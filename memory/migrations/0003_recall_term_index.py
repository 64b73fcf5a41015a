"""Recall's lexical index: the BM25 terms of every ASCII body, in a GIN index (PostgreSQL).

`iris_recall_terms(body)` is `memory.lexical.terms` for bodies made of ASCII characters
only (for those, NFKC is the identity and case folding is `lower`), and NULL for any other
body, which recall always hands to Python instead. The stop words are frozen here as they
were when this migration was written; tests/memory/test_lexical_sql.py checks the SQL
against the Python on generated text, so a change to either one fails there first.

With it, recall counts a query term's document frequency and walks the rows that hold a
term in recency order without tokenising any body (memory/recall_db.py).
`memory_recall_gates` lets the member's gated row count be an index-only scan.
"""

from django.db import migrations

from memory.lexical import STOP_WORDS

_STOP_WORDS_SQL = "ARRAY[" + ",".join(f"'{w}'" for w in sorted(STOP_WORDS)) + "]::text[]"

# `memory.lexical.stem` over one lower-case ASCII word, step for step.
STEM = r"""
CREATE OR REPLACE FUNCTION iris_recall_stem(word text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    w text := word;
    s text;
BEGIN
    IF length(w) <= 3 OR w !~ '^[a-z]+$' THEN
        RETURN w;
    END IF;
    IF right(w, 3) = 'ies' AND length(w) > 4 THEN
        w := left(w, -3) || 'y';
    ELSIF right(w, 4) = 'sses' THEN
        w := left(w, -2);
    ELSIF right(w, 3) = 'xes' OR right(w, 4) IN ('ches', 'shes', 'zzes') THEN
        w := left(w, -2);
    ELSIF right(w, 1) = 's' AND right(w, 2) NOT IN ('ss', 'us', 'is') THEN
        w := left(w, -1);
    END IF;
    IF right(w, 3) = 'ied' AND length(w) > 4 THEN
        w := left(w, -3) || 'y';
    ELSIF right(w, 3) = 'eed' THEN
        NULL;
    ELSIF right(w, 2) = 'ed' AND length(w) > 4 AND left(w, -2) ~ '[aeiouy]' THEN
        s := left(w, -2);
        IF length(s) > 2 AND right(s, 1) = substr(s, length(s) - 1, 1)
                AND right(s, 1) NOT IN ('l', 's', 'z') THEN
            s := left(s, -1);
        END IF;
        w := s;
    ELSIF right(w, 3) = 'ing' AND length(w) > 5 AND left(w, -3) ~ '[aeiouy]' THEN
        s := left(w, -3);
        IF length(s) > 2 AND right(s, 1) = substr(s, length(s) - 1, 1)
                AND right(s, 1) NOT IN ('l', 's', 'z') THEN
            s := left(s, -1);
        END IF;
        w := s;
    END IF;
    IF right(w, 1) = 'e' AND length(w) > 3 AND right(w, 2) NOT IN ('ee', 'ie') THEN
        w := left(w, -1);
    END IF;
    RETURN w;
END
$$
"""

TERMS = f"""
CREATE OR REPLACE FUNCTION iris_recall_terms(body text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(body) <> char_length(body) THEN NULL ELSE ARRAY(
        SELECT iris_recall_stem(m[1])
        FROM regexp_matches(lower(body COLLATE "C"), '[a-z0-9]+', 'g') AS m
        WHERE m[1] <> ALL ({_STOP_WORDS_SQL})
          AND (length(m[1]) > 1 OR m[1] ~ '^[0-9]$')
    ) END
$$
"""  # noqa: S608

# Keys carry the member ("42:coffee"), so a lookup reads that member's posting list only,
# not the term's postings over every member. A non-ASCII body gets the one key "42:" (no
# term is empty), so recall finds those bodies through the same index.
MEMBER_TERMS = """
CREATE OR REPLACE FUNCTION iris_recall_member_terms(member_id bigint, body text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(body) <> char_length(body)
        THEN ARRAY[member_id::text || ':']
        ELSE ARRAY(SELECT member_id::text || ':' || t FROM unnest(iris_recall_terms(body)) AS t)
    END
$$
"""

PG_FORWARD = [
    STEM,
    TERMS,
    MEMBER_TERMS,
    # Costly enough that the planner never evaluates them row by row to filter a scan
    # when the GIN index can answer (measured: 44 us a row, 0.9 s for one 1k member).
    "ALTER FUNCTION iris_recall_terms(text) COST 100000",
    "ALTER FUNCTION iris_recall_member_terms(bigint, text) COST 100000",
    # A scope key names its member and the member its tenant: without this the planner
    # multiplies the three selectivities, expects a handful of rows and sorts instead of
    # walking memory_recall_recency.
    "CREATE STATISTICS IF NOT EXISTS memory_recall_member_scope (dependencies) "
    "ON tenant_id, member_id, scope_key FROM memory_memoryentry",
    "CREATE INDEX IF NOT EXISTS memory_recall_terms ON memory_memoryentry "
    "USING gin (iris_recall_member_terms(member_id, body)) "
    "WHERE is_current AND lifecycle = 'active'",
    # Every column the database gates test, so counting a member's gated rows (BM25's
    # document count) reads the index only.
    "CREATE INDEX IF NOT EXISTS memory_recall_gates ON memory_memoryentry "
    "(tenant_id, member_id, scope_key) "
    "INCLUDE (adapter_scope, category, suppression_reason, suppression_ends_at) "
    "WHERE is_current AND lifecycle = 'active'",
]
PG_BACKWARD = [
    "DROP STATISTICS IF EXISTS memory_recall_member_scope",
    "DROP INDEX IF EXISTS memory_recall_gates",
    "DROP INDEX IF EXISTS memory_recall_terms",
    "DROP FUNCTION IF EXISTS iris_recall_member_terms(bigint, text)",
    "DROP FUNCTION IF EXISTS iris_recall_terms(text)",
    "DROP FUNCTION IF EXISTS iris_recall_stem(text)",
]


def pg_forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_FORWARD:
            schema_editor.execute(statement)


def pg_backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_recall")]

    operations = [migrations.RunPython(pg_forward, pg_backward)]
