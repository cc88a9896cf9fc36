// The Lua script RedisStore runs, embedded at build time from scripts/*.lua
// (see embed_scripts.cmake), and its SHA1 for EVALSHA.
#pragma once

#include <string_view>

namespace sluice::redis {

extern const std::string_view kLuaScript;
extern const std::string_view kLuaScriptSha1;  // 40 lower-case hex digits
// Cached mode's sync (scripts/cached_sync.lua), a script of its own.
extern const std::string_view kCachedSyncScript;
extern const std::string_view kCachedSyncScriptSha1;
// The fixed window's fast path (scripts/fast_fixed_window.lua), likewise.
extern const std::string_view kFastFixedWindowScript;
extern const std::string_view kFastFixedWindowScriptSha1;

}  // namespace sluice::redis
