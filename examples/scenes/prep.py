# Put two vegetables on the cutting board (prep).
from sim import Scene, grasped, on, place

scene = Scene(family="prep", seed=seed)
tomato = scene.add_object("tomato", role="target")
potato = scene.add_object("potato", role="target")
board = scene.add_object("cutting_board", role="receptacle")
scene.set_task(
    "put the tomato and the potato on the cutting board",
    success=on(tomato, board) & on(potato, board) & ~grasped(tomato) & ~grasped(potato),
)
scene.set_layout(place(board, xy=(0.50, 0.12)), place(tomato, xy=(0.38, -0.15)), place(potato, xy=(0.55, -0.18)))
