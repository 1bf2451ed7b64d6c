// minrepro-slurm-job: what a trial's Slurm job runs (engine/executors/slurm_job.h).
// Built without LibTorch so that it starts in milliseconds on a node.
#include "engine/executors/slurm_job.h"

int main(int argc, char** argv) { return minrepro::slurmJobMain(argc, argv); }
