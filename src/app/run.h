// sluice's process: the command line, the config, the admin token, the
// signals, and a Gateway from start to shutdown.
#pragma once

namespace sluice::app {

// The whole process; returns its exit code (0, 1: cannot start, 2: usage
// or config error).
int run(int argc, char** argv);

}  // namespace sluice::app
