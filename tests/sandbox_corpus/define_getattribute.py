# expect: forbidden
class Sneaky:
    def __getattribute__(self, name):
        return name

result = Sneaky().x
