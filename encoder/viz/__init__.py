"""Plotly and Graphviz builders: figures from traces and configs, testable without Streamlit."""
