// Gives freed heap memory back to the operating system, in the background.
//
// glibc's malloc keeps what a thread frees in that thread's arena for reuse and returns it to the
// system only from the top of the heap. A server whose HTTP threads each compile large, distinct
// constraints (automata, their masks, the subset construction's scratch) so keeps its peak for
// ever: 1,000 such requests left ~0.2 GiB more resident than before them, of which malloc_trim
// returned ~90% (docs/RESULTS.md, "Memory after large constraint requests").
// request_memory_release() asks for a malloc_trim(0) on a background thread, at most one a
// second, a moment after the request (so a burst of frees is trimmed once); callers are the
// places that free or churn much memory at once. Elsewhere than glibc it does nothing.
#pragma once

namespace shrike {

// Schedules a release (cheap: a flag and a notify; the trim runs on its own thread).
void request_memory_release();

// For a server: caps glibc's malloc arenas at max(4, 2 x hardware threads) unless the
// MALLOC_ARENA_MAX environment variable sets its own. glibc's default, 8 per core, lets each of
// a server's many HTTP threads keep an arena of its own, each holding on to its peak: after
// 1,000 large distinct constraint requests on 2 cores, 16 arenas left resident memory 1.20x what
// it was before them even after malloc_trim, 4 arenas 1.04x at the same throughput
// (docs/RESULTS.md). Returns the cap set, or 0 where none was.
int limit_malloc_arenas();

}  // namespace shrike
