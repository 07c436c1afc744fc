"""A struckdown 0.x script with a custom action and conversation history.

The action's value joins the conversation as a user turn, as in 0.x; `@history` reads the
turns so far from `context["_history_messages"]`.
"""

from struckdown import LLM, Actions, LLMCredentials, complete

ORDERS = {"A-100": "two lamps, shipped Monday", "A-200": "one desk, awaiting stock"}


@Actions.register("order_status", on_error="return_default", default="unknown order")
def order_status(context, order_id: str):
    return f"Order {order_id}: {ORDERS[order_id]}"


TEMPLATE = """<system>You answer questions about orders.</system>
[[@history]]
[[@order_status:status|order_id=order]]
Answer the customer's last question in one sentence. [[answer]]"""

HISTORY = [
    {"role": "user", "content": "Where is my order A-100?"},
    {"role": "assistant", "content": "Let me check."},
]

for order in ("A-100", "Z-999"):
    result = complete(
        TEMPLATE,
        {"order": order, "_history_messages": HISTORY},
        model=LLM("gpt-4.1-mini"),
        credentials=LLMCredentials.from_env(),
    )
    print(order, "|", result["status"], "|", result["answer"])
