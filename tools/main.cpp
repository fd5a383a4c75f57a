// magi2-norm: the command-line face of the library (tools/cli.cpp has the usage).
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char **argv) { return magi2norm::cli::run_cli(std::vector<std::string>(argv + 1, argv + argc)); }
