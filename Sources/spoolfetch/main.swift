import ArgumentParser
import SpoolDaemon
print("x")
