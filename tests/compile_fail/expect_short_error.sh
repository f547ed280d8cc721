#!/bin/sh
# Runs a compiler command that must fail; prints its output, then "error lines: N" and "exit status S". The
# Compile.* tests' regular expressions check the message, and this script that it fails in at most MAX lines
# (the first argument).
max=$1
shift
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
lines=$(printf '%s\n' "$out" | wc -l)
echo "error lines: $lines"
echo "exit status $status"
if [ "$status" -ne 0 ] && [ "$lines" -le "$max" ]; then echo "short enough"; fi
