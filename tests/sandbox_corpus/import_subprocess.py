# expect: forbidden
import subprocess

subprocess.run(['touch', marker])
