"""Lua scripts of the Redis transport (each runs atomically on the server).

- :data:`PUBLISH`: add feed entries with explicit ids, checking each one
  the stream refuses, and removing entries another writer put above the
  frontier's own sequence;
- :data:`TICK`: the frontier's heartbeat on its lock and its crawl's run
  record;
- :data:`RELEASE`: give the lock up if it is still ours.
"""

# Publishes (sequence, payload) pairs into the feed stream KEYS[1] as
# entries '<sequence>-1'. ARGV[1] is the highest sequence the frontier has
# issued: entries above it were written by someone else and are removed
# (and the stream's and groups' ids set back) before anything is added.
# An id the stream refuses is checked: the same payload there already is a
# republished entry; anything else is a conflict, returned. Returns
# {added, present, removed, repaired, conflicting sequences...}.
PUBLISH = """
local key = KEYS[1]
local function split(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local function above(a, b)
  local am, as = split(a)
  local bm, bs = split(b)
  return am > bm or (am == bm and as > bs)
end
local removed, repaired = 0, 0
local kind = redis.call('TYPE', key).ok
if kind ~= 'stream' and kind ~= 'none' then
  redis.call('DEL', key)
  repaired = 1
end
local made = redis.pcall('XGROUP', 'CREATE', key, 'spiders', '0', 'MKSTREAM')
local ours = ARGV[1] .. '-1'
local info = redis.call('XINFO', 'STREAM', key)
local last = '0-0'
for i = 1, #info, 2 do if info[i] == 'last-generated-id' then last = info[i + 1] end end
if above(last, ours) then
  repaired = 1
  while true do
    local got = redis.call('XRANGE', key, '(' .. ours, '+', 'COUNT', 500)
    if #got == 0 then break end
    local ids = {}
    for i, e in ipairs(got) do ids[i] = e[1] end
    removed = removed + redis.call('XDEL', key, unpack(ids))
  end
  local tail = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  local top = '0-1'
  if #tail > 0 then top = tail[1][1] end
  redis.call('XSETID', key, top)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, delivered
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then delivered = g[i + 1] end
    end
    if above(delivered, top) then redis.call('XGROUP', 'SETID', key, name, top) end
  end
end
local added, present = 0, 0
local conflicts = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i] .. '-1'
  local res = redis.pcall('XADD', key, id, 'm', ARGV[i + 1])
  if type(res) == 'table' and res.err then
    if not string.find(res.err, 'equal or smaller', 1, true) then return redis.error_reply(res.err) end
    local e = redis.call('XRANGE', key, id, id)
    if #e == 1 and #e[1][2] == 2 and e[1][2][2] == ARGV[i + 1] then
      present = present + 1
    else
      conflicts[#conflicts + 1] = ARGV[i]
    end
  else
    added = added + 1
  end
end
return {added, present, removed, repaired, unpack(conflicts)}
"""

# The frontier's heartbeat: KEYS[1] the lock, KEYS[2] the run record;
# ARGV[1] our lock value, ARGV[2] its expiry (ms), ARGV[3] our run record.
# Returns {lock, run}: 1 ours, 2 was missing and is ours again (the broker
# lost it), 0 another frontier's (nothing changed).
TICK = """
local lock = redis.call('GET', KEYS[1])
local l, r = 0, 0
if lock == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2]); l = 1
elseif not lock then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]); l = 2
end
local run = redis.call('GET', KEYS[2])
if run == ARGV[3] then
  r = 1
elseif not run and l ~= 0 then
  redis.call('SET', KEYS[2], ARGV[3]); r = 2
end
return {l, r}
"""

# Deletes the lock KEYS[1] if it holds ARGV[1].
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
