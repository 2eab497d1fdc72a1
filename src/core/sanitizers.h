// Which sanitizer this translation unit is compiled with, the same way on GCC (which defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__) and clang 14 (which defines neither and answers
// __has_feature instead): SHRIKE_ASAN, SHRIKE_TSAN, and SHRIKE_SANITIZED for either. Tests use
// them to lift criteria a sanitizer's allocator or slowdown makes meaningless (resident memory
// under ASan's quarantine, wall-clock limits) and to shrink sample counts.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SHRIKE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHRIKE_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SHRIKE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHRIKE_TSAN 1
#endif
#endif

#if defined(SHRIKE_ASAN) || defined(SHRIKE_TSAN)
#define SHRIKE_SANITIZED 1
#endif
