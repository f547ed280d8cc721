#!/bin/sh
# Runs a command that must fail, prints its output and then "exit status N": the Cli.* tests' regular expressions
# (tests/CMakeLists.txt) check both the message and that the command failed.
"$@"
echo "exit status $?"
