-- catalog: publish or refresh the task catalog of worker W (docs/schema.md,
-- "The task catalog").  Called once at worker start with the document, then
-- with every heartbeat with the digest only, so a steady worker sends a few
-- bytes; the entry expires with the lease, so a dead worker's types drop out.
--
-- KEYS[1]  {ns}:catalog:W   hash: "digest" -> hex digest, "doc" -> JSON
--
-- ARGV[1]  lease in ms (the entry's TTL)
-- ARGV[2]  digest of the document
-- ARGV[3]  the JSON document, or "" to refresh only
--
-- Returns 1 when the entry now holds the document with that digest, 0 when
-- a refresh found no entry or another digest (the caller sends the document).
--
-- Errors: none

local lease, digest, doc = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if doc ~= '' then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'digest', digest, 'doc', doc)
    redis.call('PEXPIRE', KEYS[1], lease)
    return 1
end
if redis.call('HGET', KEYS[1], 'digest') == digest then
    redis.call('PEXPIRE', KEYS[1], lease)
    return 1
end
return 0
