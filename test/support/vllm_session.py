"""What every test client that stands for vLLM's HF3FS connector shares:
its requests Session, with vLLM's retry policy (urllib3 Retry(total=3,
backoff_factor=0.3, status_forcelist=[500, 502, 503, 504],
allowed_methods=["GET", "POST"]): about 1.8 s of retries in all) and no
retry of its own, and the stop signal of the test (its stdin closing)."""
import sys
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def vllm_session():
    """vllm_session is a keep-alive Session that retries as vLLM's client does."""
    session = requests.Session()
    retry = Retry(total=3, backoff_factor=0.3, status_forcelist=[500, 502, 503, 504], allowed_methods=["GET", "POST"])
    session.mount("http://", HTTPAdapter(max_retries=retry))
    return session


def stopped_when_stdin_closes():
    """stopped_when_stdin_closes is an Event set once the test closes this process's stdin."""
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    return stopped
