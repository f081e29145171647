"""robopin_ros.actions.ask: an idempotent service call whose reply never came is sent again; the first answer wins.

The server is a real rclpy Trigger service over Fast DDS. rmw_fastrtps drops a reply whose client reader the
server has not matched yet (rmw_response.cpp: "client will not receive response"); to the client such a reply is
one that never comes, which the server here produces on purpose by holding a request's callback until the test
ends. Every answer names the request it answers (its number, in arrival order).
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def trigger_pair(ros_context):
    """A Trigger server on a 4-thread executor (its callbacks may run side by side) and a client on an executor of
    its own; yields (client, behave) where behave(n) runs in the server's callback for its n-th request."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    behaviour: dict[str, object] = {"behave": lambda n: None}
    count_lock = threading.Lock()
    received: list[int] = []
    answered: list[int] = []
    released = threading.Event()

    def on_request(_request, response):
        with count_lock:
            received.append(len(received) + 1)
            n = received[-1]
        behaviour["behave"](n, released)
        response.success, response.message = True, f"answer {n}"
        with count_lock:
            answered.append(n)
        return response

    server_node = Node("ask_server", context=ros_context, namespace="/asktest")
    server_node.create_service(Trigger, "trigger", on_request, callback_group=ReentrantCallbackGroup())
    client_node = Node("ask_client", context=ros_context, namespace="/asktest")
    client = client_node.create_client(Trigger, "trigger")
    executors = []
    for node, threads in ((server_node, 4), (client_node, 2)):
        executor = MultiThreadedExecutor(num_threads=threads, context=ros_context)
        executor.add_node(node)
        threading.Thread(target=executor.spin, daemon=True).start()
        executors.append(executor)
    assert client.wait_for_service(timeout_sec=10.0)
    try:
        yield client, behaviour, received
    finally:
        released.set()  # held callbacks answer before their service is destroyed
        deadline = time.monotonic() + 5.0
        while len(answered) < len(received) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        for executor in executors:
            executor.shutdown(timeout_sec=2.0)
        client_node.destroy_node()
        server_node.destroy_node()


def test_a_reply_that_never_comes_is_asked_for_again_and_the_second_answer_taken(trigger_pair):
    from robopin_ros.actions import ASK_AGAIN_S, ask
    from std_srvs.srv import Trigger

    client, behaviour, received = trigger_pair
    behaviour["behave"] = lambda n, released: released.wait(60.0) if n == 1 else None  # the first reply: dropped
    started = time.monotonic()
    answer = ask(client, Trigger.Request(), 30.0)
    elapsed = time.monotonic() - started
    assert answer is not None and answer.message == "answer 2", answer
    assert elapsed >= ASK_AGAIN_S and received == [1, 2]
    assert not client._pending_requests  # the unanswered first request is no longer waited for


def _count_sends(client) -> list[float]:
    """Record when each request leaves the client (the client's own call_async, timed)."""
    sent: list[float] = []
    call_async = client.call_async

    def counted(request):
        sent.append(time.monotonic())
        return call_async(request)

    client.call_async = counted
    return sent


def test_a_slow_server_answers_the_first_request_and_is_not_flooded(trigger_pair):
    """Each answer takes 4.5 s: the request goes again after 1 s, then after 2 s more (the wait doubles), and the
    first request's answer is the one taken. Asking every second would have sent five."""
    from robopin_ros.actions import ASK_AGAIN_S, ask
    from std_srvs.srv import Trigger

    client, behaviour, _ = trigger_pair
    sent = _count_sends(client)
    behaviour["behave"] = lambda n, released: released.wait(4.5)
    answer = ask(client, Trigger.Request(), 30.0)
    assert answer is not None and answer.message == "answer 1", answer
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert len(sent) >= 2 and all(gap >= ASK_AGAIN_S * 2**i for i, gap in enumerate(gaps)), gaps


def test_no_answer_within_the_timeout_is_none_and_nothing_stays_pending(trigger_pair):
    from robopin_ros.actions import ask
    from std_srvs.srv import Trigger

    client, behaviour, received = trigger_pair
    behaviour["behave"] = lambda n, released: released.wait(60.0)
    started = time.monotonic()
    assert ask(client, Trigger.Request(), 2.5) is None
    assert time.monotonic() - started >= 2.5
    assert len(received) >= 1 and not client._pending_requests


def test_a_stop_ends_the_wait_at_once(trigger_pair):
    from robopin_ros.actions import ask
    from std_srvs.srv import Trigger

    client, behaviour, _ = trigger_pair
    behaviour["behave"] = lambda n, released: released.wait(60.0)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    assert ask(client, Trigger.Request(), 30.0, should_stop=stop.is_set) is None
    assert time.monotonic() - started < 5.0


def test_a_client_answered_before_waits_four_times_its_slowest_answer_before_asking_again(trigger_pair):
    """Answered in 0.8 s, then in 1.2 s: neither sent again (a loaded server is not given the same work twice). A
    third reply that never comes is asked for again after four times the slowest answer (>= 4.8 s), not after 1 s."""
    from robopin_ros.actions import SLOW_ANSWER_FACTOR, ask
    from std_srvs.srv import Trigger

    client, behaviour, _ = trigger_pair
    sent = _count_sends(client)
    holds = {1: 0.8, 2: 1.2, 3: 60.0}
    behaviour["behave"] = lambda n, released: released.wait(holds[n]) if n in holds else None
    assert ask(client, Trigger.Request(), 30.0).message == "answer 1"
    assert ask(client, Trigger.Request(), 30.0).message == "answer 2"
    assert len(sent) == 2, [later - sent[0] for later in sent]
    answer = ask(client, Trigger.Request(), 30.0)
    assert answer is not None and answer.message == "answer 4", answer
    assert len(sent) == 4 and sent[3] - sent[2] >= SLOW_ANSWER_FACTOR * 1.2, [t - sent[2] for t in sent[2:]]
