-- Least privilege on refgate's shared database: run as the role that owns
-- the schema (the one `refgate db migrate` ran as), after the migration.
-- Gateways log in as refgate_gateway and cannot publish a policy or
-- rewrite a record; people who publish policies log in as
-- refgate_publisher. Give them passwords or peer/cert authentication in
-- pg_hba.conf as your site does; tests/db/test_roles.sh proves this set.
CREATE ROLE refgate_gateway LOGIN;
CREATE ROLE refgate_publisher LOGIN;

GRANT USAGE ON SCHEMA public TO refgate_gateway, refgate_publisher;
GRANT SELECT ON refgate_schema, policies TO refgate_gateway, refgate_publisher;

-- The audit chain: append and read; the head row moves; `pending` is
-- cleared when an outcome arrives. No DELETE, and no UPDATE of a line
-- (column privileges: only the pending flag).
GRANT SELECT, INSERT ON audit_records TO refgate_gateway;
GRANT UPDATE (pending) ON audit_records TO refgate_gateway;
GRANT SELECT, UPDATE ON audit_head TO refgate_gateway;
GRANT SELECT, INSERT, UPDATE ON gateways TO refgate_gateway;

-- Run tokens: publish this gateway's public key, retire it, revoke, prune.
GRANT SELECT, INSERT, UPDATE ON token_keys TO refgate_gateway;
GRANT SELECT, INSERT, DELETE ON token_revocations TO refgate_gateway;

-- Approvals and the packs reviewers look at.
GRANT SELECT, INSERT, UPDATE ON approvals TO refgate_gateway;
GRANT SELECT, INSERT, UPDATE, DELETE ON approval_packs TO refgate_gateway;

-- Publishing: a new version; never an old one changed.
GRANT INSERT ON policies TO refgate_publisher;
