"""Leave a daemon that escapes every mark it can (`env -i setsid -f ...`, but with its pid known): run it with a
scrubbed environment; it forks a grandchild in a session of its own, which writes its pid to argv[1] and sleeps,
and exits, so the grandchild is re-parented away from whoever started it."""

import os
import sys
import time

if os.fork() == 0:
    os.setsid()
    with open(sys.argv[1] + ".tmp", "w") as pid_file:
        pid_file.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
