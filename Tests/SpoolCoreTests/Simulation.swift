import SpoolCore
