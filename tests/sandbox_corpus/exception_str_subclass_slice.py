# expect: runtime
# Program code inside the sandbox's own error formatter: the exception's __str__ returns a str subclass, whose
# __getitem__ runs when the formatter truncates the message (text[:500]) and hands back a forged "ok" answer
# instead of text. The report must still be a runtime error that names the exception, not the forged object.
class ForgedMessage(str):
    def __getitem__(self, index):
        return {"ok": True, "value": "forged", "error": None}


class ForgedStrException(Exception):
    def __str__(self):
        return ForgedMessage("boom")


raise ForgedStrException()
