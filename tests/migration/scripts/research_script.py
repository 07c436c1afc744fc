"""A struckdown 0.x research script: evidence from local notes, key points, a summary.

`@evidence` searches the folder named by `context["evidence_folder"]`; the summary runs
after a checkpoint, so it sees only the points (as `{{ points }}`), not the evidence.
"""

import sys

from struckdown import LLM, LLMCredentials, LLMError, complete

TEMPLATE = """<system>You are a careful research assistant.</system>
[[@evidence:found|question, n=2]]
Question: {{ question }}
Quote the key points from the evidence above: [[extract+:points]]
<checkpoint>Summary</checkpoint>
Key points: {{ points }}
Summarise them for a busy reader: [[summary]]"""

try:
    result = complete(
        TEMPLATE,
        {"question": "Does caffeine affect sleep?", "evidence_folder": sys.argv[1]},
        model=LLM("gpt-4.1-mini"),
        credentials=LLMCredentials.from_env(),
    )
except LLMError as e:
    print("failed:", e, "(retry later)" if e.is_retryable else "")
    raise SystemExit(1)

print("evidence:", result["found"].splitlines()[0])
print("points:", result["points"])
print("summary:", result["summary"])
