"""A struckdown 0.x batch classifier: support tickets into categories, with urgency."""

from struckdown import LLM, CostSummary, LLMCredentials, complete_batch

TEMPLATE = """<system>You classify customer support tickets.</system>
Ticket: {{ ticket }}

Which team should handle it? [[pick:category|billing,technical,sales]]

Does it need an answer today? [[bool:urgent]]"""

TICKETS = [
    "I was charged twice for March.",
    "The router keeps rebooting every hour.",
    "Do you offer a business plan with a static IP?",
]

results = complete_batch(
    TEMPLATE,
    [{"ticket": t} for t in TICKETS],
    model=LLM("gpt-4.1-mini"),
    credentials=LLMCredentials.from_env(),
    max_concurrent=1,
)

for ticket, result in zip(TICKETS, results):
    print(f"{result['category']:<10} urgent={result['urgent']!s:<5} {ticket}")
print(CostSummary.from_results(results).format_summary().splitlines()[0].split(" (")[0])
