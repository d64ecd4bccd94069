#pragma once
// What the files of collectives_test share: the communicators its test
// environment makes (collectives_test.cpp) before the first test runs, and
// destroys after the last. Every rank runs the same tests in the same order,
// so each TEST is one conversation between the ranks.

#include <ringreduce/ringreduce.h>

namespace collectives_env {

extern rrComm_t g_comm;        // default settings
extern rrComm_t g_small_comm;  // tiny chunks: many columns in flight even for small counts
extern int g_rank;
extern int g_size;

}  // namespace collectives_env
