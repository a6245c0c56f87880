// sluice: priority-and-fairness gateway for LLM inference servers.
#include "app/run.h"

int main(int argc, char** argv) { return sluice::app::run(argc, argv); }
