"""PASS/FAIL lines for the server tests that run etude serve from standard-library Python
(many_connections_test.py, slow_clients_test.py, http_speech_test.py,
openai_client_test.py, pipecat_openai_test.py, serve_vulkan_test.py): each check prints one line and a failed one
is remembered in `failures`, so a test runs every check and exits non-zero at its end if any
failed. The tests import it from their own folder (ctest runs them as scripts, so Python puts
the folder first on sys.path), as the speechd tests share sd_module_client.py.
"""

failures = []


def check(name, cond, detail=""):
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)
    return cond
