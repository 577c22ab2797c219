# expect: forbidden
import socket

s = socket.create_connection(('example.com', 80))
