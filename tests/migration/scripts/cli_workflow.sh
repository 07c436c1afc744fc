#!/bin/sh
# A struckdown 0.x command-line workflow: try a prompt, then classify a folder of tickets.
# The endpoint and model come from LLM_API_BASE, LLM_API_KEY and DEFAULT_LLM.
set -e

sd chat -p triage.sd -c customer=Dana -o triage.json

sd batch -p classify.sd -i 'tickets/*.txt' -t types/ -h 2 -o classified.csv
