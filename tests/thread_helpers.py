"""Running test code in threads that take turns as often as the interpreter allows."""
import sys
import threading


def run_interleaved(work, arguments):
    """``work(argument)`` in one thread per argument, with a 1 µs switch interval (threads take
    turns between almost any two operations); returns once every thread has finished."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(argument,)) for argument in arguments]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
