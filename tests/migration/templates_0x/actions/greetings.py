# a struckdown 0.x action file (docs/migration.md's example)
from struckdown import Actions


@Actions.register("shout", on_error="return_empty")
def shout(context, text: str, times: int = 1):
    return (text.upper() + "!") * times
