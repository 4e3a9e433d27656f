// Associated apps and well-known files: see WellKnownFiles.swift
