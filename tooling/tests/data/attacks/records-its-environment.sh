#!/bin/sh
# Planted as a git hook and as core.fsmonitor in a hub folder: records that it ran, and with which
# environment, in the file named by its first line's replacement below.
env >> "@LOG@"
