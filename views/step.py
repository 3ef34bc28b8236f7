"""Placeholder until the teaching tools land."""

import streamlit as st

import ui

ui.frame()
st.info("This teaching view is being built.")
