terraform import virtplane_user.alice alice
