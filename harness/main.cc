#include "harness/trial_main.h"

int main(int argc, char** argv) { return minrepro::trialMain(argc, argv); }
