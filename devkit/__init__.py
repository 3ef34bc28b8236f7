"""Tooling that the tests, the benchmarks, deploy/ and scripts/ share; the app never imports it.

server.py starts `streamlit run app.py` and Debian's Chromium; client.py is one browser tab spoken over Streamlit's
WebSocket protocol, and loadgen.py a class of them; apptest.py is the one harness for Streamlit's AppTest;
hostile_inputs.py holds the sentences a class may paste. Run the tools as modules from the repository root
(`python -m benchmarks.app_bench`, `python -m deploy.warm URL`), so every package imports as the app does.
"""
